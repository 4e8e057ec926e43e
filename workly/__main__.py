from workly.cli import main

main()
