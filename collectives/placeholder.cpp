// replaced by the communicator's sources once rendezvous/ and transport/tcp/ land
