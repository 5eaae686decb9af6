"""Errors raised by model backends. ``core`` converts them into its own tree.

ModelBackendError
├── ModelFileError         missing, truncated, wrong checksum or not a GGUF file
├── ModelNotFound          no model of that name (locally or on the endpoint)
├── ContextOverflow        the prompt does not fit the model's context window
├── EndpointError          an OpenAI-compatible server failed
│   ├── EndpointUnreachable    connection refused / DNS / timeout
│   ├── AuthenticationFailed   401/403
│   └── MalformedResponse      not the protocol, or invalid JSON where JSON was asked
├── StructuredOutputError  the output did not validate against the schema (after retry)
└── GenerationCancelled    cancelled between tokens
"""

from __future__ import annotations


class ModelBackendError(Exception):
    """Root of model-layer errors. ``hint`` says what the user can do."""

    default_hint = ""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint if hint is not None else self.default_hint

    def __str__(self) -> str:
        return f"{self.message} {self.hint}".strip() if self.hint else self.message


class ModelFileError(ModelBackendError):
    default_hint = "Delete the file and let Sourcebook assemble it again, or pick another model."


class ModelNotFound(ModelBackendError):
    default_hint = "Run `sourcebook models` to list the models Sourcebook can use."


class ContextOverflow(ModelBackendError):
    default_hint = "Shorten the input or choose a model with a larger context window."


class EndpointError(ModelBackendError):
    default_hint = "Check the server's URL and that it is running."


class EndpointUnreachable(EndpointError):
    pass


class AuthenticationFailed(EndpointError):
    default_hint = "Check the API key (setting `models.api_key` or the endpoint's key variable)."


class MalformedResponse(EndpointError):
    default_hint = "The server did not answer in the OpenAI-compatible format."


class StructuredOutputError(ModelBackendError):
    """``text`` is the model's last answer, so a caller can keep what of it is usable (the
    complete items of a list the answer was cut inside)."""

    default_hint = "Try a larger model for this role."

    def __init__(self, message: str, *, hint: str | None = None, text: str = "") -> None:
        super().__init__(message, hint=hint)
        self.text = text


class GenerationCancelled(ModelBackendError):
    default_hint = ""
