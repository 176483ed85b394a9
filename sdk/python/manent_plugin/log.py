"""hclog JSON lines on stderr: what a go-plugin host (manent) parses into levelled log rows.

One JSON object per line: `@level` (trace|debug|info|warn|error), `@message`, `@module` (the
plugin's name), `@timestamp` (`2006-01-02T15:04:05.000000Z07:00`: six fractional digits), and the
record's `extra=` attributes as top-level keys: JSON values stay what they are (numbers, booleans,
lists), anything else becomes its text.
"""

import contextvars
import json
import logging
import os
import sys
import traceback
from datetime import datetime, timezone
from typing import Any, Dict, Optional

TRACE = 5
logging.addLevelName(TRACE, "TRACE")

# Attributes every LogRecord has: whatever else a record carries came from `extra=`.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime",
                                                                         "taskName"}
# Keys hclog reserves; an extra with one of these names is renamed rather than overwrite it.
_RESERVED = {"@level", "@message", "@module", "@timestamp"}


# The call the running task serves (its deployment, and its target when it has one): a line
# logged during the call names it unless the line names its own, whichever logger logged it.
CALL: "contextvars.ContextVar[Optional[Dict[str, str]]]" = contextvars.ContextVar(
    "manent_plugin_call", default=None)

# Logged (at debug) when a call returns or is cancelled, with call, idempotency_key, ms and
# cancelled — when the conformance kit started the plugin, which reads how long a cancelled call
# ran on from it.
CALL_ENDED = "call ended"


class TargetLog(logging.LoggerAdapter):
    """A logger whose lines name one target (`req.target_log(t)`)."""

    def process(self, msg: Any, kwargs: Any) -> Any:
        kwargs["extra"] = {**(self.extra or {}), **kwargs.get("extra", {})}
        return msg, kwargs


def level_name(levelno: int) -> str:
    """The hclog level of a logging level number."""
    if levelno < logging.DEBUG:
        return "trace"
    if levelno < logging.INFO:
        return "debug"
    if levelno < logging.WARNING:
        return "info"
    if levelno < logging.ERROR:
        return "warn"
    return "error"


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def _value(value: Any) -> Any:
    """An attribute as JSON: numbers, booleans, None, lists and dicts of them as they are
    (what go-hclog sends); anything else as its text."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_value(v) for v in value]
    if isinstance(value, dict):
        return {_text(k): _value(v) for k, v in value.items()}
    return _text(value)


class HclogFormatter(logging.Formatter):
    """Formats a record as one hclog JSON line (no trailing newline)."""

    def __init__(self, module: str):
        super().__init__()
        self.module = module

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "@level": level_name(record.levelno),
            "@message": _text(record.getMessage()),
            "@timestamp": datetime.fromtimestamp(record.created, timezone.utc)
            .strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        }
        if self.module:
            entry["@module"] = self.module
        for key, value in vars(record).items():
            if key in _STANDARD or key.startswith("_"):
                continue
            if key in _RESERVED:
                key = key[1:]
            entry[key] = _value(value)
        call = CALL.get()
        if call and "deployment" not in entry and "deployment_id" not in entry:
            entry["deployment_id"] = call["deployment_id"]
            if "target" not in entry and "target" in call:
                entry["target"] = call["target"]
                entry["moniker"] = call["moniker"]
        if record.exc_info:
            entry["stacktrace"] = "".join(traceback.format_exception(*record.exc_info))
        if record.stack_info:
            entry["stack"] = record.stack_info
        return json.dumps(entry, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


class _StderrHandler(logging.Handler):
    """Writes to whatever fd 2 is, one line at a time (never through sys.stdout)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = (self.format(record) + "\n").encode("utf-8", "replace")
            self.acquire()
            try:
                os.write(2, line)
            finally:
                self.release()
        except Exception:  # noqa: BLE001 - logging must never raise into the caller
            self.handleError(record)


def module_name() -> str:
    """The plugin's name: the executable's file name (what Configure answers)."""
    return os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "plugin"


_LOGGER: Optional[logging.Logger] = None


def _trace(self: logging.Logger, msg: Any, *args: Any, **kwargs: Any) -> None:
    if self.isEnabledFor(TRACE):
        kwargs.setdefault("stacklevel", 2)
        self._log(TRACE, msg, args, **kwargs)  # pylint: disable=protected-access


def logger() -> logging.Logger:
    """The plugin's logger (the one the factory receives): hclog JSON on stderr, every level.

    `log.trace(...)` (or `log.log(manent_plugin.TRACE, ...)`) logs below debug;
    `log.info("deployed", extra={"target": t.name})` adds attributes (`target` names the row's
    target in manent's logs).
    """
    global _LOGGER  # pylint: disable=global-statement
    if _LOGGER is None:
        if not hasattr(logging.Logger, "trace"):
            logging.Logger.trace = _trace  # type: ignore[attr-defined]
        log = logging.getLogger("manent_plugin.plugin")
        log.setLevel(TRACE)
        log.propagate = False
        handler = _StderrHandler()
        handler.setFormatter(HclogFormatter(module_name()))
        log.addHandler(handler)
        # grpclib's own warnings (a broken connection) as hclog lines too.
        lib = logging.getLogger("grpclib")
        lib.setLevel(logging.WARNING)
        lib.propagate = False
        lib.addHandler(handler)
        _LOGGER = log
    return _LOGGER
