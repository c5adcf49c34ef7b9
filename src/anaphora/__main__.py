from anaphora.cli.main import main

main()
