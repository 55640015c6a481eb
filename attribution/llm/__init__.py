"""What the LLM attribution methods and scorers share: calls with a case's accounting (:mod:`.calls`), prompt
parts (:mod:`.prompting`), fitting steps into a budget (:mod:`.prompt_fit`), reply contracts (:mod:`.replies`) and
how the scripted double reads a rendered case (:mod:`.scripted_log`)."""
