"""spark-submit's entry point for the load job (mainApplicationFile); the job is the
``scalable_topics.loadjob`` package, installed in the Spark image."""

import sys

from scalable_topics.loadjob.cli import main

if __name__ == "__main__":
    sys.exit(main())
