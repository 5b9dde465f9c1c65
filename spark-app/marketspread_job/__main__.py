"""`python -m marketspread_job` or `spark-submit .../marketspread_job/__main__.py`: same as `marketspread job`.

Absolute imports only: spark-submit runs this file as a script, outside its package.
"""

import sys

from marketspread.cli import main

if __name__ == "__main__":
    sys.exit(main(["job", *sys.argv[1:]]))
