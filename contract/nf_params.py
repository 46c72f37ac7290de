"""An NF's parameters as the controller and the NF host exchange them: a JSON object.

The one rule for `nf-host run --params`, `nfc update --params`, the HTTP API's update body and
the control API's `UpdateNf` (`params_json`).
"""

from __future__ import annotations

import json


def parse_params(text: str, what: str = "params") -> dict[str, object]:
    """An NF's parameters from their JSON text (a JSON object); ValueError naming `what` and
    what is wrong. The one rule for `nf-host run --params`, `nfc update --params`, the API's
    update body and `UpdateNf`."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{what} is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ValueError(f"{what} must be a JSON object, not {type(value).__name__}")
    return value
