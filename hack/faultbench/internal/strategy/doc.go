// Package strategy is the fault benchmark's catalogue of strategies (how a producer copes with a
// bad broker): their names in report order, what each is (as the report describes it) and the
// settings the descriptions and the drivers share. It names strategies only; the drivers and the
// real environment run them.
package strategy
