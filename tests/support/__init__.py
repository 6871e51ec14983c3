"""What the tests share: the CLI harness, scripted loops, store contract fixtures,
replays of transcripts; a test module imports helpers from here, never from another test."""
