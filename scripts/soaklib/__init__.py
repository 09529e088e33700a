"""The soak of `ember serve` (scripts/soak.py, docs/design/testing.md), one concept per module:

* `checker`: sector stamps and the NBD contract per sector (`Model`);
* `rawnbd`: a minimal NBD client for connections dropped mid-request;
* `client`: one verifying client process;
* `servers`: nbdkit with its error and delay filters, and `ember serve` with its history.
"""
