"""The runtime's commands (``--help``'s lines; each command's module is imported only when it runs)."""

from descriptor.commands import declare

declare("list-systems", "list the systems (topologies) a run can use, plugins' included", "mas.cli:list_systems_parser")
declare("studio-config", "write langgraph.json serving every registered system in Studio",
        "mas.cli:studio_config_parser")
declare("run", "run benchmarks × systems × tasks × runs and write artifacts", "mas.cli:run_parser")
declare("init-config", "write the example experiment config (every key, commented)", "mas.cli:init_config_parser")
declare("cache", "the response cache: stats, clear, export", "mas.llm.cache_cli:cache_parser")
declare("model", "build, assemble, serve and stop the embedded local model", "mas.serving.cli:model_parser")
declare("export-otel", "send finished runs' traces to an OpenTelemetry backend (OTLP/HTTP)",
        "mas.otel.cli:export_otel_parser")
