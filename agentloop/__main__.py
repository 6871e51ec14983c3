from agentloop._cli.main import main

raise SystemExit(main())
