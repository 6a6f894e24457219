// Package controllers translates Topic, FaultPolicy and broker Pod resources into the producer
// runtime's state, and the runtime's isolation decisions back into resource status.
package controllers
