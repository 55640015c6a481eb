"""Model routes, their providers (a registry) and the one model-call layer (retries, usage, tool calls, JSON)."""

from descriptor.exports import lazy_exports

_EXPORTS = {
    "BoundModel": "mas.llm.providers",
    "InjectionPlan": "mas.llm.injection",
    "LLMCallError": "mas.llm.call",
    "LLMResult": "mas.llm.call",
    "ModelSet": "mas.llm.models",
    "PROVIDERS": "mas.llm.providers",
    "ProviderRequest": "mas.llm.providers",
    "ToolCallRequest": "mas.llm.tool_calls",
    "call_llm": "mas.llm.call",
    "count_tokens": "mas.llm.call",
    "make_chat_model": "mas.llm.models",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
