import sys

from vm.run import main

sys.exit(main())
