"""What the LLM attribution methods and scorers share: calls with a case's accounting (:mod:`.calls`), prompt
parts (:mod:`.prompting`), fitting steps into a budget (:mod:`.prompt_fit`) and reply contracts (:mod:`.replies`)."""
