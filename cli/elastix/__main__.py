import sys

from elastix.main import main

sys.exit(main())
