"""`python -m pytriton.server '<ServerConfig as JSON>'`: the server process that `Triton` starts."""

import sys

from pytriton.server.process import main

sys.exit(main())
