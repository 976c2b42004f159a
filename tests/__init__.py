from pathlib import Path

# The test folder and the repository's root, for tests that read the tree's files.
TESTS_DIR = Path(__file__).resolve().parent
ROOT_DIR = TESTS_DIR.parent
