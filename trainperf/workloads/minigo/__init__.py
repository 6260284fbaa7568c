"""minigo: Go by self-play (MLPerf: 19x19 MiniGo; mini: small board against GNU Go)."""
