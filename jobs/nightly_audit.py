"""spark-submit entry point of the nightly audit.

    spark-submit --py-files dist/offsets_audit.zip jobs/nightly_audit.py --config conf/nightly.yaml

Takes the same flags as ``offsets-audit run``; the SparkSession is the one spark-submit gives.
"""

import sys

from offsets_audit.cli import main

if __name__ == "__main__":
    sys.exit(main(["run", *sys.argv[1:]]))
