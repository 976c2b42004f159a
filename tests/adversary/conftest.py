"""The adversary suite: attacks by someone who reads the code, each asserting that it fails and
that an honest rater passes. Fixtures come from the main suite's conftest."""
