"""`python -m fleet.simulate ...`"""

from fleet.simulate.cli import main

raise SystemExit(main())
