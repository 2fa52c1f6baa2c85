import sys

from slime.launch.cli import main

sys.exit(main())
