from lookup_knowledge.adapters.cli.eval import main

main()
