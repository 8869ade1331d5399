package cluster

// A host that restarts (its worker checks in with a new boot ID) has lost its members'
// processes but kept their sandboxes. Its members that subscribe to the start event get
// it, in the cluster's dependency order, so their services come back without a re-setup;
// a failed start makes the member down, and health takes over.
