package cluster

// Draining a host replaces each of its members by one on another host, like a member
// reported gone, but paced: in dependency order (a level's members only once the levels
// before it are off the host) and within each role's maxUnavailable. Each step is a
// replacement generation; the next step starts when a view of the hosts arrives or an
// operation ends.
