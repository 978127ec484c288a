// Package keystonetest starts a real OpenStack Keystone (the Debian package's keystone-manage
// and keystone-wsgi-public) on a private PostgreSQL cluster for one test, so the OpenStack
// provider can be run against a real identity service.
package keystonetest
