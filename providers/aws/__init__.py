"""The `aws` catalog: EC2 instance types and prices from the keyless Price List bulk API
(regions from `region_index.json`, one streamed offer file per region), plus spot prices from
EC2 DescribeSpotPriceHistory when AWS credentials are present."""
