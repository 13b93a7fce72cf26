from crossalign.cli import main

raise SystemExit(main())
