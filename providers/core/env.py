"""Every environment variable shoal reads, as a named constant (no imports: cold start)."""

ENV_HOME = "SHOAL_HOME"
ENV_CONFIG = "SHOAL_CONFIG"
ENV_PROVIDER = "SHOAL_PROVIDER"
DEFAULT_PROVIDER = "local"  # the provider when neither --provider nor SHOAL_PROVIDER says
ENV_DRIVER = "SHOAL_DRIVER"
ENV_NO_COLOR = "NO_COLOR"
ENV_DEBUG = "SHOAL_DEBUG"
ENV_IMAGE_USER = "SHOAL_IMAGE_USER"
ENV_IMAGE_PASSWORD = "SHOAL_IMAGE_PASSWORD"
ENV_IMAGE_DIR = "SHOAL_IMAGE_DIR"  # the images dir, before the config's [image] dir
# The ledger on PostgreSQL: a postgresql:// URL, before the config's [ledger] url; set but
# empty, the SQLite ledger whatever the config says (drivers/ledger/url.py).
ENV_LEDGER_URL = "SHOAL_LEDGER_URL"
# This machine's name in a team ledger's rows (letters, digits, . _ -); default: a random id
# kept in the state dir (drivers/ledger/hosts.py). Two machines must never share one.
ENV_HOST_ID = "SHOAL_HOST_ID"

# Cloud catalogs: base URLs (mirrors, proxies, air-gapped copies, tests) and credentials.
ENV_AWS_PRICING_URL = "SHOAL_AWS_PRICING_URL"  # default https://pricing.us-east-1.amazonaws.com
ENV_AWS_EC2_URL = "SHOAL_AWS_EC2_URL"  # EC2 API (spot prices, the aws driver); {region} is replaced
ENV_AWS_ACCESS_KEY_ID = "AWS_ACCESS_KEY_ID"
ENV_AWS_SECRET_ACCESS_KEY = "AWS_SECRET_ACCESS_KEY"
ENV_AWS_SESSION_TOKEN = "AWS_SESSION_TOKEN"
ENV_AWS_PROFILE = "AWS_PROFILE"  # a profile of the AWS CLI's credentials and config files
ENV_AWS_SHARED_CREDENTIALS_FILE = "AWS_SHARED_CREDENTIALS_FILE"  # default ~/.aws/credentials
ENV_AWS_CONFIG_FILE = "AWS_CONFIG_FILE"  # default ~/.aws/config
ENV_AWS_REGION = "AWS_REGION"
ENV_AWS_DEFAULT_REGION = "AWS_DEFAULT_REGION"
ENV_AWS_QUOTAS_URL = "SHOAL_AWS_QUOTAS_URL"  # Service Quotas API; {region} is replaced
ENV_AWS_SSM_URL = "SHOAL_AWS_SSM_URL"  # SSM API (public AMI parameters); {region} is replaced
ENV_AZURE_PRICES_URL = "SHOAL_AZURE_PRICES_URL"  # default https://prices.azure.com
ENV_AZURE_MANAGEMENT_URL = "SHOAL_AZURE_MANAGEMENT_URL"  # default https://management.azure.com
ENV_AZURE_TOKEN = "SHOAL_AZURE_TOKEN"  # an ARM bearer token as it is, before the chain below
ENV_AZURE_SUBSCRIPTION_ID = "AZURE_SUBSCRIPTION_ID"
# Azure credentials, read as Azure's own tools read them (providers/azure/credentials.py,
# azure-identity's DefaultAzureCredential): a service principal's client id and tenant with a
# secret or a certificate (PEM or PKCS#12, maybe with a password); a workload's federated
# token file (AKS workload identity); the token endpoint's authority; App Service's managed
# identity endpoint and its header; the instance metadata service's authority (asked
# without it only on an Azure VM) and shoal's switch that says not to look for one; the
# chain's narrowing ("dev", "prod" or one credential's name); the Azure CLI's directory.
ENV_AZURE_CLIENT_ID = "AZURE_CLIENT_ID"
ENV_AZURE_TENANT_ID = "AZURE_TENANT_ID"
ENV_AZURE_CLIENT_SECRET = "AZURE_CLIENT_SECRET"
ENV_AZURE_CLIENT_CERTIFICATE_PATH = "AZURE_CLIENT_CERTIFICATE_PATH"
ENV_AZURE_CLIENT_CERTIFICATE_PASSWORD = "AZURE_CLIENT_CERTIFICATE_PASSWORD"
ENV_AZURE_FEDERATED_TOKEN_FILE = "AZURE_FEDERATED_TOKEN_FILE"
ENV_AZURE_AUTHORITY_HOST = "AZURE_AUTHORITY_HOST"  # default https://login.microsoftonline.com
ENV_AZURE_IDENTITY_ENDPOINT = "IDENTITY_ENDPOINT"  # App Service, Functions, Container Apps
ENV_AZURE_IDENTITY_HEADER = "IDENTITY_HEADER"
ENV_AZURE_IMDS_AUTHORITY = "AZURE_POD_IDENTITY_AUTHORITY_HOST"  # default http://169.254.169.254
ENV_AZURE_NO_IMDS_CHECK = "SHOAL_AZURE_NO_IMDS_CHECK"  # "true": never ask an Azure VM's IMDS
ENV_AZURE_TOKEN_CREDENTIALS = "AZURE_TOKEN_CREDENTIALS"
ENV_AZURE_CONFIG_DIR = "AZURE_CONFIG_DIR"  # default ~/.azure
ENV_GCP_BILLING_URL = "SHOAL_GCP_BILLING_URL"  # default https://cloudbilling.googleapis.com
ENV_GCP_COMPUTE_URL = "SHOAL_GCP_COMPUTE_URL"  # default https://compute.googleapis.com
ENV_GCP_API_KEY = "SHOAL_GCP_API_KEY"  # Cloud Billing Catalog API key
ENV_GCP_TOKEN = "SHOAL_GCP_TOKEN"  # OAuth bearer token for the Compute Engine API
ENV_GCP_PROJECT = "SHOAL_GCP_PROJECT"  # project whose machine types are listed
# GCP's Application Default Credentials, read as Google's own tools read them
# (providers/gcp/credentials.py): a key or credential configuration file; gcloud's directory
# (its ADC file and configurations) and the configuration it makes active; the project as
# google-auth and gcloud take it; the metadata server's host (a GCE VM's service account),
# and google-auth's switch that says not to look for one.
ENV_GCP_APPLICATION_CREDENTIALS = "GOOGLE_APPLICATION_CREDENTIALS"
ENV_GCP_CLOUDSDK_CONFIG = "CLOUDSDK_CONFIG"  # default ~/.config/gcloud
ENV_GCP_CLOUDSDK_ACTIVE_CONFIG = "CLOUDSDK_ACTIVE_CONFIG_NAME"  # default: its active_config file
ENV_GCP_CLOUDSDK_PROJECT = "CLOUDSDK_CORE_PROJECT"
ENV_GCP_CLOUD_PROJECT = "GOOGLE_CLOUD_PROJECT"
ENV_GCP_METADATA_HOST = "GCE_METADATA_HOST"  # default metadata.google.internal, asked on GCE only
ENV_GCP_NO_GCE_CHECK = "NO_GCE_CHECK"  # "true": never ask the metadata server

# Kubernetes: where kubeconfig files are (colon-separated, as kubectl reads it).
ENV_KUBECONFIG = "KUBECONFIG"
ENV_KUBE_CONTEXT = "SHOAL_KUBE_CONTEXT"  # the context when neither --context nor --region says

# Container driver: where the Docker-compatible engine listens (unix:///path or tcp://host:port).
ENV_DOCKER_HOST = "DOCKER_HOST"

# The user's home directory, where gcloud and the Azure CLI keep their files unless
# CLOUDSDK_CONFIG or AZURE_CONFIG_DIR says.
ENV_USER_HOME = "HOME"
