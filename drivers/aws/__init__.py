"""The `aws` driver (alias `ec2`): EC2 instances, launched and ended through the EC2 API."""
