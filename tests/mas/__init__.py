"""Tests of the runtime: topologies, the model-call layer, sweeps, tracing, the embedded model."""
