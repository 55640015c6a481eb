"""The embedded model: llama-server built from source, started and stopped by the project."""

from descriptor.exports import lazy_exports

_EXPORTS = {
    "CATALOGUE": "mas.serving.catalogue",
    "EmbeddedServerError": "mas.serving.server",
    "ensure_server": "mas.serving.server",
    "install": "mas.serving.server",
    "server_status": "mas.serving.server",
    "stop_server": "mas.serving.server",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
