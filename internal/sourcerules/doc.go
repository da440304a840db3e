// Package sourcerules holds the tests that keep the module's own rules about
// its source true as the code changes: which function may hand a message to
// a destination, and where the wall clock may be read. Each rule is checked
// on the type-checked non-test files of every package in the module, so a
// new violation fails `make test` with its file and line.
package sourcerules
