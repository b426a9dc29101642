"""`python -m guardrails.engine.cli {ci,validate} ARGUMENTS...`."""

import sys

from guardrails.engine.cli.console import module_main

sys.exit(module_main(sys.argv[1:]))
