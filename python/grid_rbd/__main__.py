"""`python -m grid_rbd`: the `grid-rbd` command (grid_rbd.cli)."""

import sys

from grid_rbd.cli import main

sys.exit(main())
