from agentloop._cli import main

raise SystemExit(main())
