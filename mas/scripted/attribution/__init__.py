"""The double's answers to attribution's contracts (``attribution.<method>.<stage>``), one module per method
family: :mod:`.whowhen` (all_at_once, step_by_step, binary_search), :mod:`.echo`, :mod:`.chief`, :mod:`.scorers`
(llm_naive, llm_roles), each reading the case from the call's hints (:mod:`.case`). Nothing here imports
``attribution``: the answers know a case only by what its calls say about it."""
