"""`python -m grid_codegen`: see `grid_codegen.cli`."""

import sys

from grid_codegen.cli import main

sys.exit(main())
