module shoal.test/upstream

go 1.19
