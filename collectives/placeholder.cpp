// replaced by the communicator's sources
