"""Creates, in a moto server, what dra-provider-aws needs to serve two node groups of the
EKS cluster "demo": a VPC and subnet, launch templates, and Auto Scaling groups tagged for
cluster-autoscaler's discovery (and one group with an instance type EC2 does not know, which
the provider skips with a reason).

    python3 -m moto.server -p 5000 &
    python3 cloudproviders/aws/examples/moto-groups.py http://127.0.0.1:5000
"""

import sys

import boto3

endpoint = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:5000"
session = boto3.session.Session(
    aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1"
)
ec2 = session.client("ec2", endpoint_url=endpoint)
asg = session.client("autoscaling", endpoint_url=endpoint)
vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.0.0/20", AvailabilityZone="us-east-1a")[
    "Subnet"
]["SubnetId"]
tags = [
    {"Key": "k8s.io/cluster-autoscaler/enabled", "Value": "true"},
    {"Key": "k8s.io/cluster-autoscaler/demo", "Value": "owned"},
]
for name, instance_type in [
    ("demo-cpu", "m5.4xlarge"),
    ("demo-p5", "p5.48xlarge"),
    ("demo-typo", "p5.48xlarge-typo"),
]:
    template = ec2.create_launch_template(
        LaunchTemplateName=f"{name}-lt",
        LaunchTemplateData={"ImageId": "ami-12c6146b", "InstanceType": instance_type},
    )["LaunchTemplate"]["LaunchTemplateId"]
    asg.create_auto_scaling_group(
        AutoScalingGroupName=name,
        MinSize=0,
        MaxSize=4,
        DesiredCapacity=0,
        VPCZoneIdentifier=subnet,
        LaunchTemplate={"LaunchTemplateId": template, "Version": "$Default"},
        Tags=[dict(t, PropagateAtLaunch=True) for t in tags],
    )
    print(f"created Auto Scaling group {name} ({instance_type})")
