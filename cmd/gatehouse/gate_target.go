package main

import (
	"gatehouse/ledger"
	"gatehouse/ledger/destinations"
)

// destinationUsage describes --destination in help texts.
const destinationUsage = "destination URL: " + destinations.Usage

// openDestination resolves a --destination URL to the destination that
// delivers there; a malformed URL is a usage error that shows no password.
func openDestination(verb, raw string) (ledger.Destination, error) {
	d, err := destinations.Open(raw)
	if err != nil {
		return nil, usageErr("%s: --destination: %v", verbTitle(verb), err)
	}
	return d, nil
}

// parseDestination reads a --destination URL as an endpoint without opening
// anything (a file:// directory is not created).
func parseDestination(verb, raw string) (ledger.Endpoint, error) {
	ep, err := destinations.Parse(raw)
	if err != nil {
		return ep, usageErr("%s: --destination: %v", verbTitle(verb), err)
	}
	return ep, nil
}
