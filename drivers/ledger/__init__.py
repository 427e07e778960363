"""The allocation ledger: one SQLite file shared by every shoal process (db, rows,
store, windows over time, the --wait queue and its doorbells). `book.Ledger` is its face."""
