"""Remembers the window's geometry and the sizes of its splitter panes across restarts.

Why not the settings file: pane sizes are Qt's own opaque state (``QSplitter.saveState``,
``QWidget.saveGeometry``) that only this window reads, change with every drag, and are not
something a user sets. They go to a small ``QSettings`` INI file in the app's home
(``<home>/window.ini``), beside the settings, so each home (and each test's temporary home) has
its own and nothing is written to the user's desktop configuration.

Which splitters: every ``QSplitter`` under the window with an object name (the name is its key),
so a panel opts in by naming its splitter. Sizes are saved when the user stops dragging (after a
short pause) and when the window closes, each splitter only while it is on screen with all its
panes shown; they are restored once, when the window is first shown
and its layout has given the splitters their real sizes (restored earlier, a splitter would
rescale them to its first provisional size).

Threading: UI thread only (``QSettings`` writes a few hundred bytes; no core call).
"""

from __future__ import annotations

import logging
from pathlib import Path

import shiboken6
from PySide6.QtCore import QByteArray, QEvent, QObject, QSettings, QTimer
from PySide6.QtWidgets import QSplitter, QWidget

logger = logging.getLogger(__name__)

FILE_NAME = "window.ini"
SAVE_DELAY_MS = 600
_GEOMETRY = "window/geometry"
_PANES = "panes"


class PaneMemory(QObject):
    """Saves and restores ``window``'s geometry and named splitters (see the module docstring)."""

    def __init__(self, window: QWidget, home: Path) -> None:
        super().__init__(window)
        self._window = window
        self.path = home / FILE_NAME
        self._settings = QSettings(str(self.path), QSettings.Format.IniFormat)
        self._restored = False
        self._watched: set[str] = set()
        self._save_timer = QTimer(self)
        self._save_timer.setSingleShot(True)
        self._save_timer.setInterval(SAVE_DELAY_MS)
        self._save_timer.timeout.connect(self.save)

    def splitters(self) -> dict[str, QSplitter]:
        """The window's named splitters (the main one and those of its panels) by key: the path
        of names from the window down, so one panel used twice (a report view in the Report
        and the Ask tabs) keeps two sizes."""
        found = [s for s in self._window.findChildren(QSplitter) if s.objectName()]
        return {self._key(s): s for s in found}

    def _key(self, widget: QWidget) -> str:
        names = []
        node: QWidget | None = widget
        while node is not None and node is not self._window:
            names.append(node.objectName() or type(node).__name__)
            node = node.parentWidget()
        return "/".join(reversed(names))

    @property
    def restored(self) -> bool:
        """Whether :meth:`restore_panes` ran (it acts once)."""
        return self._restored

    def restore_geometry(self) -> bool:
        """Put the window back where and as large as it was (before it is shown)."""
        value = self._settings.value(_GEOMETRY)
        return isinstance(value, QByteArray) and self._window.restoreGeometry(value)

    def restore_panes(self) -> list[QSplitter]:
        """Restore the saved pane sizes once (call when the window is first shown); returns the
        splitters restored or waiting to be. A splitter not on screen yet (on another tab)
        is restored when it is first shown, once its layout gave it its real size. From then
        on, a pane a user drags is saved shortly after."""
        if self._restored:
            return []
        self._restored = True
        done: list[QSplitter] = []
        for name, splitter in self.splitters().items():
            value = self._settings.value(f"{_PANES}/{name}")
            if not isinstance(value, QByteArray):
                continue
            done.append(splitter)
            if splitter.isVisible():
                splitter.restoreState(value)
            else:
                _RestoreOnShow(splitter, value)
        self.watch()
        return done

    def watch(self) -> None:
        """Save after a drag of any named splitter (those added since the last call too)."""
        for name, splitter in self.splitters().items():
            if name not in self._watched:
                self._watched.add(name)
                splitter.splitterMoved.connect(lambda *_args: self._save_timer.start())

    def save(self) -> None:
        """Write the geometry and every named splitter's sizes now."""
        self._save_timer.stop()
        self._settings.setValue(_GEOMETRY, self._window.saveGeometry())
        for name, splitter in self.splitters().items():
            # A splitter off screen (another tab) or with a pane hidden (a report's checks before
            # a report opens) reports sizes of 0, which would collapse its panes when restored:
            # what was saved when it was last fully shown stays.
            if splitter.isVisible() and all(size > 0 for size in splitter.sizes()):
                self._settings.setValue(f"{_PANES}/{name}", splitter.saveState())
        self._settings.sync()
        if self._settings.status() != QSettings.Status.NoError:
            logger.warning("could not save the window layout to %s", self.path)


class _RestoreOnShow(QObject):
    """Restores one splitter's state when it is first shown (then deletes itself): after the
    show's layout pass, when the splitter has its real width or height."""

    def __init__(self, splitter: QSplitter, state: QByteArray) -> None:
        super().__init__(splitter)
        self._splitter = splitter
        self._state = state
        splitter.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Show and watched is self._splitter:
            watched.removeEventFilter(self)
            QTimer.singleShot(0, self._restore)
        return False

    def _restore(self) -> None:
        if shiboken6.isValid(self._splitter):
            self._splitter.restoreState(self._state)
        self.deleteLater()
