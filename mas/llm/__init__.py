"""Model routes and the one model-call layer (retries, usage, tool calls, JSON replies)."""

from descriptor.exports import lazy_exports

_EXPORTS = {
    "BoundModel": "mas.llm.models",
    "LLMCallError": "mas.llm.call",
    "LLMResult": "mas.llm.call",
    "ModelSet": "mas.llm.models",
    "ToolCallRequest": "mas.llm.call",
    "call_llm": "mas.llm.call",
    "count_tokens": "mas.llm.call",
    "make_chat_model": "mas.llm.models",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
