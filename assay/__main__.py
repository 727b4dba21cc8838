from assay.cli.main import main

main()
