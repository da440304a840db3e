package main

import (
	"gatehouse/destination"
	"gatehouse/destination/registry"
)

// destinationUsage describes --destination in help texts.
const destinationUsage = "destination URL: " + registry.Usage

// openDestination resolves a --destination URL to the destination that
// delivers there; a malformed URL is a usage error that shows no password.
func openDestination(verb, raw string) (destination.Destination, error) {
	d, err := registry.Open(raw)
	if err != nil {
		return nil, usageErr("%s: --destination: %v", verbTitle(verb), err)
	}
	return d, nil
}

// parseDestination reads a --destination URL as an endpoint without opening
// anything (a file:// directory is not created).
func parseDestination(verb, raw string) (destination.Endpoint, error) {
	ep, err := registry.Parse(raw)
	if err != nil {
		return ep, usageErr("%s: --destination: %v", verbTitle(verb), err)
	}
	return ep, nil
}
