"""Test suites shipped with the package, for third-party backends to run against their own stores."""
