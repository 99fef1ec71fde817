package hostproduct

//go:generate go run ./gen
